// The page's entry point: its words in the browser's language, then the controller
// (page.ts), which opens the thread the page had open and keeps the sidebar current.

import { applyStatic } from "./i18n";
import { Page } from "./page";
import { forgetStoredKey } from "./store";
import "./style.css";

forgetStoredKey(); // before anything reads the key
applyStatic();
const page = new Page();
page.pollThreads();
void page.start();
