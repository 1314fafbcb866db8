// The playground page: Pyodide and polang from this server (no CDN), the engine run on
// every edit (polang.playground.session.evaluate), its answer shown. docs/playground.md.
import { loadPyodide } from "./pyodide/pyodide.mjs";

const $ = (id) => document.getElementById(id);
const EDITORS = ["schema", "policies", "entities", "request"];
const SAMPLE = {
  schema: `namespace Docs {
  entity User = { "clearance": Long };
  entity Document = { "owner": User, "level": Long };
  action "read", "edit" appliesTo { principal: [User], resource: [Document] };
}`,
  policies: `@id("owners-edit")
permit (principal, action == Docs::Action::"edit", resource)
when { resource.owner == principal };

@id("cleared-read")
permit (principal, action == Docs::Action::"read", resource)
when { principal.clearance >= resource.level };`,
  entities: JSON.stringify(
    [
      { uid: { type: "Docs::User", id: "alice" }, attrs: { clearance: 2 }, parents: [] },
      { uid: { type: "Docs::User", id: "bob" }, attrs: { clearance: 5 }, parents: [] },
      {
        uid: { type: "Docs::Document", id: "plan" },
        attrs: { owner: { __entity: { type: "Docs::User", id: "bob" } }, level: 3 },
        parents: [],
      },
    ],
    null,
    2,
  ),
  request: JSON.stringify(
    {
      principal: 'Docs::User::"alice"',
      action: 'Docs::Action::"read"',
      resource: 'Docs::Document::"plan"',
      context: {},
    },
    null,
    2,
  ),
};

function list(id, items) {
  const ul = $(id);
  ul.replaceChildren(
    ...items.map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }),
  );
}

function render(out, ms) {
  for (const e of EDITORS) $(e).classList.remove("bad");
  const problems = out.problems || [];
  list(
    "problems",
    problems.map((p) => {
      $(p.editor)?.classList.add("bad");
      const where = p.line ? `:${p.line}:${p.column}` : "";
      return `${p.editor}${where}: ${p.message}`;
    }),
  );
  const decision = $("decision");
  if (problems.length) {
    decision.textContent = "no decision";
    decision.dataset.decision = "";
    $("reasons").textContent = "";
    for (const id of ["explanation"]) $(id).textContent = "";
    for (const id of ["repairs", "who-can", "what-can"]) list(id, []);
    $("repairs-note").textContent = "";
    return;
  }
  decision.textContent = out.decision.toUpperCase();
  decision.dataset.decision = out.decision;
  const errors = out.errors.map((e) => `${e.id}: ${e.error}`);
  $("reasons").textContent =
    (out.reasons.length ? `determined by ${out.reasons.join(", ")}` : "no policy applied") +
    (errors.length ? `; errors: ${errors.join("; ")}` : "") +
    ` (${ms.toFixed(1)} ms)`;
  $("explanation").textContent = out.explanation;
  list("repairs", out.repairs);
  $("repairs-note").textContent = out.repairs_note || "";
  list("who-can", out.who_can.length ? out.who_can : ["nobody"]);
  list("what-can", out.what_can.length ? out.what_can : ["nothing"]);
}

const status = (text) => {
  $("status").textContent = text;
};
for (const e of EDITORS) $(e).value = SAMPLE[e];
status("loading the Python runtime (Pyodide)…");
const py = await loadPyodide({ indexURL: new URL("./pyodide/", location.href).href });
status("loading polang…");
const zip = await (await fetch("./site-packages.zip")).arrayBuffer();
py.unpackArchive(zip, "zip", { extractDir: py.runPython("import site; site.getsitepackages()[0]") });
const evaluate = py.pyimport("polang.playground.session").evaluate;

function run() {
  const inputs = Object.fromEntries(EDITORS.map((e) => [e, $(e).value]));
  const t0 = performance.now();
  const out = JSON.parse(evaluate(JSON.stringify(inputs)));
  render(out, performance.now() - t0);
}

let timer = null;
for (const e of EDITORS) {
  $(e).addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(run, 150);
  });
}
run();
status("ready");
