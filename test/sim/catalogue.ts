// Every mutation a store's simulation knows: the shared ones (mutations.ts)
// and the store's own, by name.
import { sharedMutations } from "./mutations";
import type { Mutation, StoreKind } from "./store";
import { SIM_STORES } from "./stores";
import { Random, Scheduler } from "./world";

export function mutationsOf(store: StoreKind): Mutation[] {
  const factory = SIM_STORES[store];
  if (!factory) throw new Error(`no simulated store ${store}`);
  return [...sharedMutations, ...factory(new Scheduler(), new Random(0)).mutations];
}

export function findMutation(store: StoreKind, name: string): Mutation {
  const mutation = mutationsOf(store).find((m) => m.name === name);
  if (!mutation) throw new Error(`no mutation ${JSON.stringify(name)} for ${store}; the mutations are ${mutationsOf(store).map((m) => m.name).join(", ")}`);
  return mutation;
}
