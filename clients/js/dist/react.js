// React's hook for intents: one intent per action however often, and
// however many times at once, a component renders or mounts.
import { useCallback, useEffect, useState } from "react";
import { canonical } from "./intents.js";
/**
 * The unfinished intent of this name and meta, read or created after the
 * component mounts ({@link Intents.getOrCreate}): pass it to the mutation's
 * send. Every component, render and mount asking for the same name and
 * meta gets the same intent: React's StrictMode (which mounts twice), two
 * components rendered at once, a remount and a reload all share it, and
 * an intent sent before a reload is returned rather than a new one (resume
 * it: `intent.sent`).
 *
 * ```jsx
 * const intents = new Intents(); // module level: IndexedDB in a browser, safe under SSR
 * function PayButton({ order }) {
 *   const { intent } = useIntent(intents, { name: "pay", meta: { order: order.id } });
 *   const [pay] = useMutation(PAY);
 *   return <button disabled={!intent} onClick={() => pay({ variables: { order: order.id }, context: { intent } })}>Pay</button>;
 * }
 * ```
 *
 * Other frameworks do the same: call `intents.getOrCreate` when the view
 * mounts (it is serialised, so a second call at once waits for the first
 * and gets its intent), never `intents.create` per render or per click.
 */
export function useIntent(intents, init) {
    const id = `${init.name}\u0000${canonical(init.meta ?? null)}`;
    const [state, setState] = useState({ id, generation: 0 });
    const [generation, setGeneration] = useState(0);
    useEffect(() => {
        let live = true;
        intents.getOrCreate({ ...init, name: init.name }).then((intent) => live && setState({ id, intent, generation }), (error) => live && setState({ id, error, generation }));
        return () => {
            live = false;
        };
        // init is read through id, its name and meta as JSON.
        // eslint-disable-next-line react-hooks/exhaustive-deps
    }, [intents, id, generation]);
    const current = state.id === id && state.generation === generation ? state : undefined;
    const intent = current?.intent;
    const renew = useCallback(async () => {
        await intent?.forget();
        setGeneration((g) => g + 1);
    }, [intent]);
    return { intent, error: current?.error, renew };
}
