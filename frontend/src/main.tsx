import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { createQueryClient } from "./queryClient";
import "./styles.css";

const root = document.getElementById("root");
if (!root) throw new Error("index.html lacks the #root element the app mounts into.");

createRoot(root).render(
  <StrictMode>
    <App queryClient={createQueryClient()} />
  </StrictMode>,
);
