/**
 * NetBox's `custom_fields` on its primary models (decision 0200). Host defines no custom fields,
 * so a record reads `{}` and a write takes only `{}`: clients that always send the key
 * (Terraform's provider, a GET edited and PUT back) work, and a value for a field that does not
 * exist is refused as NetBox refuses it, never dropped in silence.
 */

export const CUSTOM_FIELDS_KEY = "custom_fields";

/** The error NetBox gives for a `custom_fields` value, or null when it is `{}`. */
export function customFieldsError(raw: unknown): string | null {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    return "Invalid data format. Custom field data must be passed as a dictionary mapping field names to their values.";
  for (const name in raw) {
    // The name is the caller's own text: bounded, never the whole of a large key.
    return `Unknown field name '${name.slice(0, 100)}' in custom field data.`;
  }
  return null;
}
