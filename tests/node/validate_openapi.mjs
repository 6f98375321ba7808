// Validates an OpenAPI document (a file path) with @apidevtools/swagger-parser: the schema of
// OpenAPI 3.0 and the references. Exit status 0 when valid; the error otherwise.
import SwaggerParser from "@apidevtools/swagger-parser";

const file = process.argv[2];
if (!file) {
  console.error("usage: node validate_openapi.mjs FILE");
  process.exit(2);
}
try {
  const api = await SwaggerParser.validate(file);
  const operations = Object.values(api.paths).reduce(
    (n, item) => n + Object.keys(item).filter((k) => k !== "parameters").length, 0);
  console.log(`valid: ${api.info.title} ${api.info.version}, OpenAPI ${api.openapi}, ` +
              `${Object.keys(api.paths).length} paths, ${operations} operations`);
} catch (e) {
  console.error(`invalid: ${e.message}`);
  process.exit(1);
}
