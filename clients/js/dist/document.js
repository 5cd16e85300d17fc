// Just enough reading of a GraphQL document, as a string, for the fetch
// function (Apollo and urql hand over parsed documents): which kind of
// operation it sends and whether it declares the key's variable.
/** Removes comments and string contents, which may hold any word. */
function strip(doc) {
    return doc.replace(/"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|#[^\n]*/g, (m) => (m.startsWith("#") ? " " : '""'));
}
/**
 * The type of the operation a document sends: the one named operationName,
 * or its first operation. A document of a selection set alone is a query.
 */
export function operationType(doc, operationName) {
    const s = strip(doc);
    if (operationName) {
        const m = new RegExp(`\\b(query|mutation|subscription)\\s+${operationName}\\b`).exec(s);
        if (m)
            return m[1];
    }
    // The first definition at depth 0 that is not a fragment. Braces inside
    // a definition's parentheses (an object as a variable's default value)
    // are not its selection set.
    let depth = 0;
    let parens = 0;
    let start = 0; // where the current definition began
    for (let i = 0; i < s.length; i++) {
        const ch = s[i];
        if (depth === 0 && (ch === "(" || ch === ")")) {
            parens += ch === "(" ? 1 : -1;
        }
        else if (depth === 0 && parens > 0) {
            continue;
        }
        else if (ch === "{") {
            if (depth === 0) {
                const word = /^\s*(query|mutation|subscription|fragment)\b/.exec(s.slice(start, i))?.[1];
                if (word !== "fragment")
                    return word ?? "query";
            }
            depth++;
        }
        else if (ch === "}") {
            if (--depth === 0)
                start = i + 1;
        }
    }
    return "query";
}
/** Whether doc declares the variable $name. */
export function declaresVariable(doc, name) {
    return new RegExp(`\\$${name}\\s*:`).test(strip(doc));
}
