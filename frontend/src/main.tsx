// The shared sheets first: each page's own sheet (imported by the page) comes after them and may build on them.
import "./styles.css";
import "./components/components.css";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { createQueryClient } from "./queryClient";

const root = document.getElementById("root");
if (!root) throw new Error("index.html lacks the #root element the app mounts into.");

createRoot(root).render(
  <StrictMode>
    <App queryClient={createQueryClient()} />
  </StrictMode>,
);
