/**
 * The HTML of the interactive API reference at /docs.
 *
 * @module
 */
/**
 * The interactive API reference served at /docs: a self-contained page (no third-party scripts,
 * so it works offline and under a strict CSP) that renders /openapi.json and sends requests.
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Customer Data Service API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2733;background:#f6f8fa}
header{background:#1d2733;color:#fff;padding:14px 24px;display:flex;gap:16px;align-items:center}
header h1{font-size:18px;margin:0;flex:1}header input{width:380px;padding:6px}
main{max-width:1100px;margin:0 auto;padding:16px 24px}h2{margin:24px 0 8px}
details{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:6px 0}
summary{cursor:pointer;padding:8px 12px;display:flex;gap:10px;align-items:center}
.m{font:600 12px monospace;padding:2px 8px;border-radius:4px;color:#fff;min-width:52px;text-align:center}
.get{background:#1f883d}.post{background:#0969da}.put{background:#9a6700}.delete{background:#cf222e}
.patch{background:#8250df}.body{padding:0 12px 12px}pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:320px}
label{display:block;margin:4px 0}label span{display:inline-block;min-width:160px;font-family:monospace}
textarea{width:100%;min-height:90px;font-family:monospace}button{padding:6px 14px;margin-top:6px}
</style></head><body>
<header><h1>Customer Data Service API</h1>
<input id="token" placeholder="Bearer token (svc_...)" autocomplete="off">
<a style="color:#9cd" href="/openapi.json">openapi.json</a></header>
<main id="root">Loading /openapi.json ...</main>
<script>
const tokenInput = document.getElementById("token");
tokenInput.value = sessionStorage.getItem("cdp-token") || "";
tokenInput.oninput = () => sessionStorage.setItem("cdp-token", tokenInput.value);
const el = (tag, attrs = {}, ...kids) => {
  const node = Object.assign(document.createElement(tag), attrs);
  for (const kid of kids) node.append(kid);
  return node;
};
function operation(path, method, op) {
  const inputs = {};
  const params = (op.parameters || []).map((p) => {
    inputs[p.name] = el("input", { placeholder: p.schema && p.schema.default !== undefined ? String(p.schema.default) : "" });
    return el("label", {}, el("span", { textContent: p.name + " (" + p.in + (p.required ? ", required" : "") + ")" }), inputs[p.name]);
  });
  const bodySchema = op.requestBody && op.requestBody.content["application/json"];
  const body = bodySchema ? el("textarea", { value: "{}" }) : null;
  const out = el("pre", { textContent: "" });
  const send = el("button", { textContent: "Send" });
  send.onclick = async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const p of op.parameters || []) {
      const v = inputs[p.name].value;
      if (!v) continue;
      if (p.in === "path") url = url.replace("{" + p.name + "}", encodeURIComponent(v));
      else if (p.in === "query") query.set(p.name, v);
    }
    const headers = { "content-type": "application/json" };
    if (tokenInput.value) headers.authorization = "Bearer " + tokenInput.value;
    const res = await fetch(url + (query.size ? "?" + query : ""), { method: method.toUpperCase(), headers, body: body ? body.value : undefined });
    const text = await res.text();
    let shown = text;
    try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch {}
    out.textContent = res.status + " " + res.statusText + "\\n" + shown;
  };
  return el("details", {},
    el("summary", {}, el("span", { className: "m " + method, textContent: method.toUpperCase() }), el("code", { textContent: path }), el("span", { textContent: op.summary || "" })),
    el("div", { className: "body" },
      el("p", { textContent: op.description || "" }), ...params,
      ...(bodySchema ? [el("div", { textContent: "Body schema:" }), el("pre", { textContent: JSON.stringify(bodySchema.schema, null, 2) }), body] : []),
      el("div", { textContent: "Responses: " + Object.keys(op.responses || {}).join(", ") }),
      send, out));
}
fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  const root = document.getElementById("root");
  root.textContent = "";
  root.append(el("p", { textContent: doc.info.description || "" }));
  const byTag = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags && op.tags[0]) || "Other";
      (byTag[tag] ||= []).push(operation(path, method, op));
    }
  }
  for (const [tag, ops] of Object.entries(byTag)) root.append(el("h2", { textContent: tag }), ...ops);
});
</script></body></html>`;
