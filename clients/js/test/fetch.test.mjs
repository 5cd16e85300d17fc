// The fetch transport against the example server, on SQLite and PostgreSQL:
// the cases of scenarios.mjs.
import { fetchAdapter } from "./adapters.mjs";
import { scenarios } from "./scenarios.mjs";

scenarios(fetchAdapter);
