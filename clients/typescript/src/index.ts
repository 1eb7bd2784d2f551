/**
 * A typed client of the uq-eval API: `openapi-fetch` over the types that `openapi-typescript`
 * generates from the committed OpenAPI document (`src/schema.d.ts`, `npm run generate`).
 *
 * `connect` gives the raw typed client (every route, `api.GET("/v1/...")`); `submit`,
 * `waitForResult` and `leaderboard` are the three calls of a round trip, each returning the
 * answer's document or throwing an `ApiError` that carries the service's error document.
 */

import createClient, { type Client, type Middleware } from "openapi-fetch";

import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";

/** The document types of the API, by their OpenAPI names (`Schemas["Leaderboard"]`). */
export type Schemas = components["schemas"];
export type SubmissionCreate = Schemas["SubmissionCreate"];
export type SubmissionAccepted = Schemas["SubmissionAccepted"];
export type SubmissionDetail = Schemas["SubmissionDetail"];
export type Result = Schemas["Result"];
export type MetricResult = Schemas["MetricResult"];
export type Leaderboard = Schemas["Leaderboard"];
export type LeaderboardEntry = Schemas["LeaderboardEntry"];
export type ErrorDetail = Schemas["ErrorDetail"];

/** The answers a client reads: JSON (a route's CSV or image variants are left to `fetch`). */
export type Json = `${string}/json`;

/** The typed client of every route of the API. */
export type Api = Client<paths, Json>;

/** A submission's states that never change again. */
export const TERMINAL: ReadonlySet<SubmissionDetail["status"]> = new Set([
  "succeeded",
  "failed",
  "cancelled",
]);

/** An answer other than success: the HTTP status and the service's `error` document. */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: ErrorDetail | undefined;

  constructor(status: number, detail: ErrorDetail | undefined, fallback: string) {
    super(detail ? `${status} ${detail.code}: ${detail.message}` : `${status}: ${fallback}`);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
  }
}

/** The `error` member of an error answer when it has the API's error shape. */
function errorDetail(body: unknown): ErrorDetail | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) {
    return undefined;
  }
  const detail = body.error;
  if (typeof detail !== "object" || detail === null) {
    return undefined;
  }
  if (!("code" in detail) || !("message" in detail)) {
    return undefined;
  }
  const { code, message } = detail;
  if (typeof code !== "string" || typeof message !== "string") {
    return undefined;
  }
  const field = "field" in detail && typeof detail.field === "string" ? detail.field : null;
  const index = "index" in detail && typeof detail.index === "number" ? detail.index : null;
  return { code, message, field, index };
}

/** The answer's document, or an `ApiError` when the service answered otherwise. */
function unwrap<T>(answer: { data?: T; error?: unknown; response: Response }): T {
  if (answer.data === undefined) {
    throw new ApiError(answer.response.status, errorDetail(answer.error), answer.response.statusText);
  }
  return answer.data;
}

/** Sends the API key as `Authorization: Bearer <key>` on every request. */
export function bearer(key: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${key}`);
      return request;
    },
  };
}

/** The typed client of the API at `baseUrl` (e.g. `http://127.0.0.1:8000`), sending `key`. */
export function connect(baseUrl: string, key: string): Api {
  const api = createClient<paths, Json>({ baseUrl });
  api.use(bearer(key));
  return api;
}

/** Submits a prediction (JSON body); the answer holds the id to poll. */
export async function submit(api: Api, body: SubmissionCreate): Promise<SubmissionAccepted> {
  return unwrap(await api.POST("/v1/submissions", { body }));
}

/** How `waitForResult` and `leaderboard` poll: at most `attempts` reads, `intervalMs` apart. */
export interface Polling {
  attempts?: number;
  intervalMs?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls a submission until it ends and returns it when it succeeded; throws when it failed or
 * was cancelled, or when it is still running after `attempts` reads.
 */
export async function waitForResult(
  api: Api,
  subId: string,
  { attempts = 600, intervalMs = 200 }: Polling = {},
): Promise<SubmissionDetail> {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const detail = unwrap(
      await api.GET("/v1/submissions/{sub_id}", { params: { path: { sub_id: subId } } }),
    );
    if (TERMINAL.has(detail.status)) {
      if (detail.status !== "succeeded") {
        throw new Error(`submission ${subId} ${detail.status}: ${detail.error ?? "no reason given"}`);
      }
      return detail;
    }
    if (attempt < attempts) {
      await sleep(intervalMs);
    }
  }
  throw new Error(`submission ${subId} did not end after ${attempts} reads`);
}

/**
 * A benchmark's leaderboard under `metric` (default: the benchmark's primary metric). The
 * rank intervals are computed after the board changes: this polls (bounded) until they are
 * current, and returns the last board read if they are not by then.
 */
export async function leaderboard(
  api: Api,
  benchId: string,
  metric?: string,
  { attempts = 100, intervalMs = 200 }: Polling = {},
): Promise<Leaderboard> {
  const query = metric === undefined ? {} : { metric };
  for (let attempt = 1; ; attempt++) {
    const board = unwrap(
      await api.GET("/v1/benchmarks/{bench_id}/leaderboard", {
        params: { path: { bench_id: benchId }, query },
      }),
    );
    if (board.ranks.status === "current" || attempt >= attempts) {
      return board;
    }
    await sleep(intervalMs);
  }
}
