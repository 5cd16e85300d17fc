// The apollo transport against the example server, on SQLite and PostgreSQL:
// the cases of scenarios.mjs.
import { apolloAdapter } from "./adapters.mjs";
import { scenarios } from "./scenarios.mjs";

scenarios(apolloAdapter);
