import { describe, expect, it } from "vitest";
import { Questions, type Answer } from "../src/questions";

const control = (id: string) => ({ id });
const answer = (id: string, value: string): Answer => ({
  entry: { interruptId: id, status: "resolved", payload: { value } },
  summary: value,
  cancelled: false,
});

describe("pending questions", () => {
  it("resume only once every question has an answer, in the questions' order", () => {
    const questions = new Questions<{ id: string }>();
    const [a, b, c] = [control("a"), control("b"), control("c")];
    questions.replace([a, b, c]);
    expect(questions.pending).toBe(true);
    expect(questions.answer("b", answer("b", "上海"))).toEqual({ next: a, left: 2 });
    expect(questions.answer("a", answer("a", "北京"))).toEqual({ next: c, left: 1 });
    const done = questions.answer("c", { entry: { interruptId: "c", status: "cancelled" }, summary: "", cancelled: true });
    expect(done).toEqual({
      batch: [a, b, c],
      resume: [answer("a", "北京").entry, answer("b", "上海").entry, { interruptId: "c", status: "cancelled" }],
    });
  });

  it("asked again after a refusal need every answer again", () => {
    const questions = new Questions<{ id: string }>();
    questions.replace([control("a"), control("b")]);
    questions.answer("a", answer("a", "x"));
    questions.dropAnswers();
    expect(questions.answerOf("a")).toBeUndefined();
    expect(questions.answer("b", answer("b", "y"))).toMatchObject({ left: 1 });
  });

  it("replaced by a new set drop the old answers; cleared, nothing is pending", () => {
    const questions = new Questions<{ id: string }>();
    questions.replace([control("a")]);
    questions.answer("a", answer("a", "x"));
    questions.replace([control("a")]);
    expect(questions.answerOf("a")).toBeUndefined();
    questions.clear();
    expect(questions.pending).toBe(false);
    expect(questions.first).toBeUndefined();
  });
});
