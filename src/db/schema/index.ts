export * from "./core";
export * from "./users";
export * from "./inventory";
export * from "./custom-objects";
export * from "./tasks";
export * from "./events";
export * from "./outbox";
