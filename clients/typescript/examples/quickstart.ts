import { connect, leaderboard, submit, waitForResult } from "../src/index.js";

const api = connect("http://127.0.0.1:8000", process.env["UQEVAL_KEY"] ?? "");
const { id } = await submit(api, {
  model_name: "demo",
  prediction: { kind: "gaussian", mean: [0.1, 0.5, -0.2], std: [1.0, 0.8, 1.2] },
  y: [0.0, 1.0, -1.0],
  analyses: { metrics: ["mae", "crps"] },
});
const done = await waitForResult(api, id); // polls, a bounded number of times
console.log("crps", done.result?.metrics?.["crps"]?.value);

// A benchmark's board (its primary metric), best first.
const board = await leaderboard(api, process.env["BENCHMARK_ID"] ?? "bench_0f1e2d3c4b5a6978");
for (const entry of board.entries) {
  console.log(entry.rank, entry.model_name, entry.value);
}
// Every other route through the typed openapi-fetch client: api.GET, api.POST, ...
const { data: catalogue } = await api.GET("/v1/metrics");
console.log(catalogue?.metrics.length, "metrics");
