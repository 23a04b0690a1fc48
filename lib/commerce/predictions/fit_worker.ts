/**
 * The worker behind `fitInWorker` (brand_predictions.ts): given a fit request (histories,
 * cut-off day, discount rate), answers `{result}` or `{error}`, off the service's event loop.
 *
 * @module
 */
import { fitAndDistribute, type FitRequest, type FitResult } from "./brand_predictions.ts";

/** The worker's global scope, as much of it as this module uses (type-checked as a window). */
interface _WorkerScope {
  onmessage: ((event: MessageEvent<FitRequest>) => void) | null;
  postMessage(message: { result?: FitResult; error?: string }): void;
}

const scope = self as unknown as _WorkerScope;
scope.onmessage = (event) => {
  try {
    scope.postMessage({ result: fitAndDistribute(event.data) });
  } catch (err) {
    scope.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) });
  }
};
