// A Standard Webhooks receiver built on the official `standardwebhooks` library, as a new
// user would write one. Usage: node webhook_receiver.mjs SECRET. Listens on 127.0.0.1 (a free
// port, printed as "PORT <n>" on stdout). Every POST is checked with Webhook.verify (which
// checks the signature and timestamp and parses the body as JSON) and, independently, the
// signature is compared with the library's own Webhook.sign over the raw body, so bodies that
// are not JSON are checked too. GET /results answers what was received, as JSON.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const secret = process.argv[2];
if (!secret) {
  console.error("usage: node webhook_receiver.mjs SECRET");
  process.exit(2);
}
const wh = new Webhook(secret);
const results = [];

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/results") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(results));
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks);
    const body = raw.toString("utf8");
    const entry = {
      id: req.headers["webhook-id"],
      content_type: req.headers["content-type"],
      body_base64: raw.toString("base64"),
      verified: false,
      signature_matches: false,
    };
    try {
      entry.payload = wh.verify(body, req.headers);
      entry.verified = true;
    } catch (e) {
      entry.verify_error = String(e.message || e);
    }
    try {
      const expected = wh.sign(req.headers["webhook-id"], new Date(Number(req.headers["webhook-timestamp"]) * 1000), body);
      entry.signature_matches = req.headers["webhook-signature"].split(" ").includes(expected);
    } catch (e) {
      entry.sign_error = String(e.message || e);
    }
    results.push(entry);
    res.writeHead(204);
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(`PORT ${server.address().port}`);
});
