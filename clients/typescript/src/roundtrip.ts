/**
 * A round trip through the API with the typed client: submit a Gaussian regression prediction
 * to a benchmark (JSON), poll until it succeeded, read the result's metrics, read the
 * benchmark's leaderboard, and print what came back as one JSON document.
 *
 *     UQEVAL_URL=http://127.0.0.1:8000 UQEVAL_KEY=... \
 *       node dist/src/roundtrip.js prediction.json BENCHMARK_ID
 *
 * `prediction.json` holds `{"mean": [...], "std": [...]}`, one value per benchmark target.
 */

import { readFileSync } from "node:fs";

import {
  connect,
  leaderboard,
  submit,
  waitForResult,
  type LeaderboardEntry,
  type Schemas,
} from "./index.js";

type Gaussian = Schemas["GaussianPrediction"];

/** A list of finite numbers, or an error naming `name`. */
function numbers(value: unknown, name: string): number[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new Error(`${name} must be a non-empty array of numbers`);
  }
  return value.map((item: unknown, i) => {
    if (typeof item !== "number" || !Number.isFinite(item)) {
      throw new Error(`${name}[${i}] must be a finite number; found ${String(item)}`);
    }
    return item;
  });
}

/** The Gaussian prediction of a `{"mean": [...], "std": [...]}` file. */
function readPrediction(path: string): Gaussian {
  const doc: unknown = JSON.parse(readFileSync(path, "utf-8"));
  if (typeof doc !== "object" || doc === null || !("mean" in doc) || !("std" in doc)) {
    throw new Error(`${path} must hold an object with "mean" and "std"`);
  }
  return { kind: "gaussian", mean: numbers(doc.mean, "mean"), std: numbers(doc.std, "std") };
}

/** What the round trip prints: the submission, its metrics, and the board. */
interface RoundTrip {
  submission_id: string;
  status: Schemas["SubmissionDetail"]["status"];
  metrics: Record<string, number | null>;
  leaderboard: {
    benchmark_id: string;
    metric: string;
    direction: string;
    ranks_status: Schemas["RankStatus"]["status"];
    total: number;
    entries: LeaderboardEntry[];
  };
}

async function main(argv: readonly string[]): Promise<RoundTrip> {
  const [predictionPath, benchmarkId] = argv;
  const url = process.env["UQEVAL_URL"];
  const key = process.env["UQEVAL_KEY"];
  if (predictionPath === undefined || benchmarkId === undefined || !url || !key) {
    throw new Error("usage: UQEVAL_URL=... UQEVAL_KEY=... roundtrip PREDICTION.json BENCHMARK_ID");
  }
  const api = connect(url, key);

  const accepted = await submit(api, {
    model_name: "typescript-roundtrip",
    benchmark_id: benchmarkId,
    visibility: "public",
    metadata: { client: "typescript" },
    prediction: readPrediction(predictionPath),
  });
  const done = await waitForResult(api, accepted.id, { attempts: 600, intervalMs: 100 });

  const metrics: Record<string, number | null> = {};
  for (const [name, metric] of Object.entries(done.result?.metrics ?? {})) {
    metrics[name] = metric.value;
  }

  const board = await leaderboard(api, benchmarkId);
  return {
    submission_id: done.id,
    status: done.status,
    metrics,
    leaderboard: {
      benchmark_id: board.benchmark_id,
      metric: board.metric,
      direction: board.direction,
      ranks_status: board.ranks.status,
      total: board.total,
      entries: board.entries,
    },
  };
}

try {
  console.log(JSON.stringify(await main(process.argv.slice(2))));
} catch (error: unknown) {
  console.error(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  process.exitCode = 1;
}
