// The urql transport against the example server, on SQLite and PostgreSQL:
// the cases of scenarios.mjs.
import { urqlAdapter } from "./adapters.mjs";
import { scenarios } from "./scenarios.mjs";

scenarios(urqlAdapter);
