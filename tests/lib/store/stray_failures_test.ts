import assert from "node:assert/strict";
import { guardStrayConnectionFailures } from "../../../lib/store/stray_failures.ts";

/** A rejection as the driver's broken socket gives it. */
function socketFailure(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

Deno.test("guardStrayConnectionFailures: a connection failure nobody awaits is reported and the process goes on", async () => {
  const warned: string[] = [];
  const unguard = guardStrayConnectionFailures((error) => warned.push(error));
  try {
    // Unhandled, as the driver's socket leaves them: without the guard, the test fails.
    void Promise.reject(socketFailure("ECONNRESET", "read ECONNRESET"));
    void Promise.reject(socketFailure("EPIPE", "This socket has been ended by the other party"));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(warned, [
      "Error: read ECONNRESET",
      "Error: This socket has been ended by the other party",
    ]);
  } finally {
    unguard();
  }
});

Deno.test("guardStrayConnectionFailures: any other rejection is left to end the process", () => {
  const warned: string[] = [];
  const unguard = guardStrayConnectionFailures((error) => warned.push(error));
  try {
    for (const reason of [new TypeError("x is undefined"), socketFailure("23505", "duplicate")]) {
      const event = new PromiseRejectionEvent("unhandledrejection", {
        promise: Promise.resolve(),
        reason,
        cancelable: true,
      });
      globalThis.dispatchEvent(event);
      assert.equal(event.defaultPrevented, false, String(reason));
    }
    assert.deepEqual(warned, []);
  } finally {
    unguard();
  }
});
