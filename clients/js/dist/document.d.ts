/**
 * The type of the operation a document sends: the one named operationName,
 * or its first operation. A document of a selection set alone is a query.
 */
export declare function operationType(doc: string, operationName?: string): "query" | "mutation" | "subscription";
/** Whether doc declares the variable $name. */
export declare function declaresVariable(doc: string, name: string): boolean;
