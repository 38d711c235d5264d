import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { type Project, projectKeys, projectUpdate } from "../api/projects";
import { RoleBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { isOverLimit } from "../components/limits";
import { useServerErrors } from "../components/useServerErrors";

/** The project's name and description; managers and admins edit them in place. */
export function ProjectDetails({ project, editable }: { project: Project; editable: boolean }) {
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(project.name);
  const [description, setDescription] = useState(project.description);
  const save = useMutation({
    mutationFn: () => projectUpdate(project.id, { name: name.trim(), description }),
    onSuccess: (updated) => {
      client.setQueryData(projectKeys.detail(project.id), updated);
      client.invalidateQueries({ queryKey: projectKeys.list() });
      setEditing(false);
    },
  });

  const server = useServerErrors(save.error);
  const nameTooLong = isOverLimit("project_name", name);

  function startEditing() {
    setName(project.name);
    setDescription(project.description);
    save.reset();
    setEditing(true);
  }

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!nameTooLong) save.mutate();
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

  return (
    <form className="card project-details-form" onSubmit={submit} aria-label="Edit project details">
      <Field label="Name" limit={{ kind: "project_name", value: name }} problems={server.errors.name}>
        {(control) => (
          <input
            {...control}
            value={name}
            data-testid="project-name"
            onChange={(e) => {
              setName(e.target.value);
              server.clear("name");
            }}
            required
          />
        )}
      </Field>
      <Field label="Description" problems={server.errors.description}>
        {(control) => (
          <textarea
            {...control}
            value={description}
            onChange={(e) => {
              setDescription(e.target.value);
              server.clear("description");
            }}
            rows={3}
          />
        )}
      </Field>
      {save.error && (
        <ErrorBanner
          error={save.error}
          fieldErrors={server.errors}
          besideFields={["name", "description"]}
          title="Could not save the project"
        />
      )}
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={save.isPending || !name.trim() || nameTooLong}>
          {save.isPending ? "Saving…" : "Save"}
        </button>
        <button type="button" className="button subtle" onClick={() => setEditing(false)} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  );
}
