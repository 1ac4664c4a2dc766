import { describe, expect, it } from "vitest";
import { describeFailure, HttpError } from "../src/api";

describe("a refused request", () => {
  it("401 asks for signing in again, with the server's reason", () => {
    const failure = describeFailure(new HttpError(401, { detail: "this key is not valid", code: "unauthorized" }));
    expect(failure.kind).toBe("auth");
    expect(failure.text).toContain("this key is not valid");
  });

  it("403 is refused like any other request: signing in again would not help", () => {
    const failure = describeFailure(new HttpError(403, { detail: "only an admin may read this", code: "admin_only" }));
    expect(failure.kind).toBe("refused");
    expect(failure.text).toContain("only an admin may read this");
  });
});
