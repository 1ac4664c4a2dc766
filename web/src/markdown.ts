// Assistant text as Markdown. Raw HTML in the text is shown as text (escaped), never
// interpreted; DOMPurify then cleans the renderer's output as a second line of defence.

import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
    // An image would be fetched as soon as it renders; a link lets the user decide.
    image({ href, text }: Tokens.Image): string {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
  },
});

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node instanceof HTMLAnchorElement) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY_CONFIG = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math"],
  FORBID_ATTR: ["style"],
  ALLOW_DATA_ATTR: false,
};

/** Links whose target DOMPurify removed (`javascript:` and the like) become their text. */
function unwrapDeadLinks(root: DocumentFragment): void {
  for (const link of root.querySelectorAll("a")) {
    if (!link.getAttribute("href")?.trim()) link.replaceWith(...link.childNodes);
  }
}

/** Render `text` as sanitised Markdown into `el`, replacing what it held. */
export function setMarkdown(el: HTMLElement, text: string): void {
  const html = marked.parse(text) as string;
  const clean = purify.sanitize(html, { ...PURIFY_CONFIG, RETURN_DOM_FRAGMENT: true });
  unwrapDeadLinks(clean);
  el.replaceChildren(clean);
}
