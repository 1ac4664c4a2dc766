// Who is signed in, and the sign-in screen. The page asks `GET /api/me` before anything
// else: a 401 brings the screen (a key or an identity provider's token, pasted; kept in
// this tab's sessionStorage only), an answer shows who in the sidebar. A 401 later in the
// session (a revoked key) brings the screen back over the page, which keeps everything
// under it, the message being typed too. Behind a trusted proxy, or on a server with no
// sign-in, the server answers at once and nothing is asked (and there is nothing to sign
// out of).

import { describeFailure, HttpError, serverMessage, whoAmI, type Me } from "./api";
import { byId } from "./dom";
import { t } from "./i18n";
import * as store from "./store";

function isUnauthorized(err: unknown): err is HttpError {
  return err instanceof HttpError && err.status === 401;
}

export class Session {
  private readonly app = byId<HTMLDivElement>("app");
  private readonly screen = byId<HTMLDivElement>("signin");
  private readonly why = byId<HTMLParagraphElement>("signin-why");
  private readonly field = byId<HTMLInputElement>("signin-key");
  private readonly error = byId<HTMLParagraphElement>("signin-error");
  private readonly submit = byId<HTMLButtonElement>("signin-submit");
  private readonly account = byId<HTMLDivElement>("account");
  private readonly signOutButton = byId<HTMLButtonElement>("sign-out");
  /** Who the server takes this tab to be; null until it has said. */
  me: Me | null = null;
  // The screen on show: its promise (every caller waits for the same sign-in) and its end.
  private asking: { done: Promise<Me>; resolve: (me: Me) => void } | null = null;
  private leaving: (() => void) | null = null;

  constructor() {
    byId<HTMLFormElement>("signin-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.tryKey();
    });
    this.signOutButton.addEventListener("click", () => this.signOut());
  }

  /** Who is signed in: the screen until someone is. null when the server cannot say (down,
   * failing): the page's own requests show why, and ask again on retry. */
  async ensure(): Promise<Me | null> {
    if (this.me) return this.me;
    try {
      return this.signedIn(await whoAmI());
    } catch (err) {
      if (!isUnauthorized(err)) return null;
    }
    return this.ask(t.signInWhy);
  }

  /** The server refused this tab's credential mid-session: the screen again, over the
   * page; resolves once signed in (as whoever signs in). */
  expired(): Promise<Me> {
    if (this.asking) return this.asking.done;
    store.apiKey.set(""); // refused: nothing worth keeping
    return this.ask(t.signInAgain);
  }

  /** `leave` runs before the page is left for another person's (sign-out). */
  onLeave(leave: () => void): void {
    this.leaving = leave;
  }

  /** Start the page over, with nothing of this person's: no key, no cached threads. */
  leave(): void {
    this.leaving?.();
    store.apiKey.set("");
    store.forgetThreads();
    window.location.replace(window.location.pathname);
  }

  private signOut(): void {
    this.leave();
  }

  private ask(why: string): Promise<Me> {
    this.why.textContent = why;
    this.error.textContent = "";
    this.field.value = "";
    this.screen.hidden = false;
    this.app.inert = true; // the page stays as it is under the screen, untouchable
    this.field.focus();
    let resolve: (me: Me) => void = () => undefined;
    const done = new Promise<Me>((r) => (resolve = r));
    this.asking = { done, resolve };
    return done;
  }

  private async tryKey(): Promise<void> {
    const key = this.field.value.trim();
    if (!key) {
      this.refuse(t.signInEmpty);
      return;
    }
    this.submit.disabled = true;
    this.error.textContent = "";
    let me: Me;
    try {
      me = await whoAmI(key);
    } catch (err) {
      const refused = isUnauthorized(err);
      this.refuse(refused ? t.signInRefused(t.said(serverMessage(err.payload))) : describeFailure(err).text);
      return;
    } finally {
      this.submit.disabled = false;
    }
    store.apiKey.set(key);
    this.field.value = "";
    this.screen.hidden = true;
    this.app.inert = false;
    const asking = this.asking;
    this.asking = null;
    asking?.resolve(this.signedIn(me));
  }

  /** A refusal under the field, which keeps what was pasted, selected for another try. */
  private refuse(text: string): void {
    this.error.textContent = text;
    this.field.focus();
    this.field.select();
  }

  private signedIn(me: Me): Me {
    this.me = me;
    store.keepThreadsOf(me.userId);
    byId("account-name").textContent = me.userId;
    // The name's first letter after any `jwt:` or `proxy:` prefix.
    byId("account-avatar").textContent = Array.from(me.userId.replace(/^[a-z]+:/, ""))[0] ?? "";
    byId("account-admin").hidden = !me.admin;
    // Behind a proxy, or on an open server, the tab holds nothing to forget.
    this.signOutButton.hidden = me.via === "proxy" || me.via === "open";
    this.account.hidden = false;
    return me;
  }
}
