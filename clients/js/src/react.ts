// React's hook for intents: one intent per action however often, and
// however many times at once, a component renders or mounts.

import { useCallback, useEffect, useState } from "react";

import { canonical, type Intent, type IntentInit, type Intents } from "./intents.js";

/** What {@link useIntent} returns. */
export interface IntentState {
  /** The intent, once read or created; undefined during the first render. */
  intent: Intent | undefined;
  /** The storage's error, if the intent could not be read or created. */
  error: unknown;
  /**
   * Forgets the intent and arms a new one with the same name and meta: for
   * another action of the same kind once this one has its final answer
   * (which settles, and forgets, the intent: a send after that replays its
   * result instead of acting again).
   */
  renew: () => Promise<void>;
}

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
export function useIntent(intents: Intents, init: IntentInit & { name: string }): IntentState {
  const id = `${init.name}\u0000${canonical(init.meta ?? null)}`;
  const [state, setState] = useState<{ id: string; intent?: Intent; error?: unknown; generation: number }>({ id, generation: 0 });
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    let live = true;
    intents.getOrCreate({ ...init, name: init.name }).then(
      (intent) => live && setState({ id, intent, generation }),
      (error: unknown) => live && setState({ id, error, generation }),
    );
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
