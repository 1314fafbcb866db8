// Runs tests/wasm/scenario.py under Pyodide in Node.js (tests/wasm/test_pyodide.py).
//
//   node runner.mjs <pyodide package dir> <wheel dir> <job.json>
//
// Loads the pyodide npm package from its folder (no CDN), installs micropip from its
// wheel, then polang's wheel and its pure-Python dependencies from local files with
// micropip (deps=False: every wheel is given), and runs the scenario with the job. Prints
// timings on stderr and one line `POLANG-RESULT <json>` on stdout.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, wheelDir, jobFile] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);

const t0 = performance.now();
const py = await loadPyodide({ indexURL: pyodideDir + path.sep });
const tLoaded = performance.now();

const wheels = fs.readdirSync(wheelDir).filter((f) => f.endsWith(".whl")).sort();
const bootstrap = wheels.filter((w) => /^(micropip|packaging)-/.test(w));
await py.loadPackage(bootstrap.map((w) => path.join(wheelDir, w)), { messageCallback: () => {} });
py.FS.mkdirTree("/wheels");
for (const w of wheels) {
  if (!bootstrap.includes(w)) py.FS.writeFile(`/wheels/${w}`, fs.readFileSync(path.join(wheelDir, w)));
}
py.FS.writeFile("/job.json", fs.readFileSync(jobFile));
py.FS.writeFile("/scenario.py", fs.readFileSync(new URL("./scenario.py", import.meta.url)));
await py.runPythonAsync(`
import os, micropip
await micropip.install(sorted("emfs:/wheels/" + w for w in os.listdir("/wheels")), deps=False)
`);
const tInstalled = performance.now();

let result;
try {
  result = await py.runPythonAsync(`
import json, sys
sys.path.insert(0, "/")
import scenario
job = json.load(open("/job.json"))
json.dumps(await scenario.run(job))
`);
} catch (e) {
  // a PythonError's message is the Python traceback (node would print minified source)
  process.stderr.write(`the scenario failed:\n${e.message}\n`);
  process.exit(1);
}
const tDone = performance.now();
process.stderr.write(
  `pyodide load ${(tLoaded - t0).toFixed(0)} ms, install ${(tInstalled - tLoaded).toFixed(0)} ms, ` +
    `scenario ${(tDone - tInstalled).toFixed(0)} ms\n`,
);
process.stdout.write(
  "POLANG-RESULT " +
    JSON.stringify({
      result: JSON.parse(result),
      node: { load_ms: tLoaded - t0, install_ms: tInstalled - tLoaded, scenario_ms: tDone - tInstalled },
    }) +
    "\n",
  // exit now: idle keep-alive connections and pending deadline timers would keep node up
  () => process.exit(0),
);
