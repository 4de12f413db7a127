// The throwaway PostgreSQL and redis-server a run starts, from the test kit,
// each only when a subject of its store is selected. Both keep their
// defaults but two on PostgreSQL: pg_stat_statements is loaded (a restart),
// which counts the statements clients send for the idle table
// (bench/scenarios/store-idle.ts), and autovacuum is off, so that none of
// its work lands in an idle window; the benchmark's tables are small and
// its server lives for one run.
import pg from "pg";
import { Redis } from "ioredis";
import { startPostgres, type PostgresServer } from "../test/kit/postgres-server";
import { startRedis, type RedisServer } from "../test/kit/redis-server";
import type { BenchContext } from "./context";
import { storeOf, type SubjectInfo } from "./subjects/types";

export interface StoreServers {
  postgres?: PostgresServer;
  redis?: RedisServer;
  /** Kills both and removes their dirs; safe to call twice. */
  close(): Promise<void>;
}

/** Starts what `subjects` need and puts their URLs in `ctx`. */
export async function startStoreServers(ctx: BenchContext, subjects: readonly SubjectInfo[]): Promise<StoreServers> {
  const servers: StoreServers = {
    async close() {
      await Promise.all([servers.postgres?.close().catch(() => undefined), servers.redis?.close().catch(() => undefined)]);
      servers.postgres = undefined;
      servers.redis = undefined;
    },
  };
  const needs = new Set(subjects.map(storeOf));
  try {
    if (needs.has("postgres")) {
      ctx.log("starting PostgreSQL");
      servers.postgres = await startPostgres();
      await prepareForCounting(servers.postgres);
      ctx.postgresUrl = servers.postgres.url;
    }
    if (needs.has("redis")) {
      ctx.log("starting redis-server");
      servers.redis = await startRedis();
      ctx.redisUrl = servers.redis.url;
    }
  } catch (err) {
    await servers.close();
    throw err;
  }
  return servers;
}

async function prepareForCounting(server: PostgresServer): Promise<void> {
  const settings = new pg.Client({ connectionString: server.url });
  await settings.connect();
  try {
    await settings.query("ALTER SYSTEM SET autovacuum = off");
    await settings.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
  } finally {
    await settings.end();
  }
  await server.restart();
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  } finally {
    await client.end();
  }
}

/** The versions for the report's machine line: what the servers say of themselves. */
export async function storeVersions(servers: StoreServers): Promise<{ postgres?: string; redis?: string }> {
  const versions: { postgres?: string; redis?: string } = {};
  if (servers.postgres) {
    const client = new pg.Client({ connectionString: servers.postgres.url });
    await client.connect();
    try {
      versions.postgres = String((await client.query<{ server_version: string }>("SHOW server_version")).rows[0]?.server_version);
    } finally {
      await client.end();
    }
  }
  if (servers.redis) {
    const client = new Redis(servers.redis.url);
    try {
      versions.redis = /redis_version:(\S+)/.exec(await client.info("server"))?.[1];
    } finally {
      client.disconnect();
    }
  }
  return versions;
}
