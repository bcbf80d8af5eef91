/** A levelled JSON-line logger. Callers must never pass secrets; `redactUrl` helps with URLs. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 };

export interface Logger {
  debug(msg: string, extra?: Record<string, unknown>): void;
  info(msg: string, extra?: Record<string, unknown>): void;
  warn(msg: string, extra?: Record<string, unknown>): void;
  error(msg: string, extra?: Record<string, unknown>): void;
  /** Whether a line at `level` is written: a caller skips building one that would not be. */
  enabled?(level: Exclude<LogLevel, "silent">): boolean;
}

export function createLogger(
  level: LogLevel = "info",
  sink: (line: string) => void = (l) => console.log(l),
): Logger {
  const at =
    (lvl: Exclude<LogLevel, "silent">) => (msg: string, extra?: Record<string, unknown>) => {
      if (ORDER[lvl] < ORDER[level]) return;
      sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...extra }));
    };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    enabled: (lvl) => ORDER[lvl] >= ORDER[level],
  };
}
