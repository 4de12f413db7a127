// Where things are, for tests that start processes or read files by path.
import { join } from "node:path";

/** The repository's root: the package itself. */
export const REPO_ROOT = join(__dirname, "..", "..");
/** Programs the tests run as processes of their own. */
export const FIXTURES = join(REPO_ROOT, "test", "fixtures");
