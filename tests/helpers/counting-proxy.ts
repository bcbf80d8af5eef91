/**
 * The counting proxy of the round-trip and race tests is the one of the edge bench
 * (tools/counting-proxy.ts): this path stays so tests written against it keep their import.
 */
export { type CountingProxy, startCountingProxy } from "../../tools/counting-proxy";
