// The page's entry point: its words in the browser's language, who is signed in
// (signin.ts: the sign-in screen until someone is), then the controller (page.ts), which
// opens the thread the page had open and keeps the sidebar current.

import { applyStatic } from "./i18n";
import { Page } from "./page";
import { Session } from "./signin";
import { forgetStoredKey } from "./store";
import "./style.css";

forgetStoredKey(); // before anything reads the key
applyStatic();
// The page starts once it knows whose cached thread list it may show.
const session = new Session();
void session.ensure().then(() => {
  const page = new Page(session);
  page.pollThreads();
  void page.start();
});
