/** Types of the `parse-prometheus-text-format` devDependency (it ships none). */
declare module "parse-prometheus-text-format" {
  export interface ParsedFamily {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED" | string;
    metrics: Array<{ value: string; labels?: Record<string, string> }>;
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
