import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { ApiError, projectUpdate } from "../api/client";
import type { Project } from "../api/types";
import { RoleBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { PROJECTS_KEY, projectKey } from "../components/projectQueries";

/** The project's name and description; managers and admins edit them in place. */
export function ProjectDetails({ project, editable }: { project: Project; editable: boolean }) {
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(project.name);
  const [description, setDescription] = useState(project.description);
  const save = useMutation({
    mutationFn: () => projectUpdate(project.id, { name: name.trim(), description }),
    onSuccess: (updated) => {
      client.setQueryData(projectKey(project.id), updated);
      client.invalidateQueries({ queryKey: PROJECTS_KEY });
      setEditing(false);
    },
  });

  function startEditing() {
    setName(project.name);
    setDescription(project.description);
    save.reset();
    setEditing(true);
  }

  function submit(event: FormEvent) {
    event.preventDefault();
    save.mutate();
  }

  if (!editing) {
    return (
      <section className="project-details">
        <div className="page-header">
          <h1>{project.name}</h1>
          <RoleBadge role={project.role} />
          <div className="header-spacer" />
          {editable && (
            <button type="button" className="button" onClick={startEditing}>
              Edit details
            </button>
          )}
        </div>
        <p className={project.description ? "description" : "description muted"}>
          {project.description || "No description yet."}
        </p>
      </section>
    );
  }

  const fieldErrors = save.error instanceof ApiError ? save.error.fieldErrors : {};
  return (
    <form className="card project-details-form" onSubmit={submit} aria-label="Edit project details">
      {save.error && <ErrorBanner error={save.error} fieldErrors={{}} title="Could not save the project" />}
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />
        {fieldErrors.name && <span className="field-error">{fieldErrors.name.join(" ")}</span>}
      </label>
      <label className="field">
        <span>Description</span>
        <textarea value={description} onChange={(e) => setDescription(e.target.value)} rows={3} />
        {fieldErrors.description && <span className="field-error">{fieldErrors.description.join(" ")}</span>}
      </label>
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={save.isPending || !name.trim()}>
          {save.isPending ? "Saving…" : "Save"}
        </button>
        <button type="button" className="button subtle" onClick={() => setEditing(false)} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  );
}
