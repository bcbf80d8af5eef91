/**
 * The app's place in its life: set draining once the server stops (SIGTERM), so `/readyz` answers
 * 503 from the first moment while requests already received are still answered (decision 0080).
 */
import type { Services } from "./context";
import { slotKey } from "./slots";

const DRAINING = slotKey<true>("lifecycle.draining");

export function markDraining(services: Services): void {
  services.state.set(DRAINING, true);
}

export function isDraining(services: Services): boolean {
  return services.state.get(DRAINING) === true;
}
