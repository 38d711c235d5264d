import { ProjectFrame } from "./ProjectFrame";

/** A section that a later release fills, saying plainly what it will hold. */
export function ComingSoon({ projectId, title, children }: { projectId: number; title: string; children: string }) {
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: title }]}>
      {() => (
        <section className="card empty-state">
          <h1>{title}</h1>
          <p>{children}</p>
          <p className="muted">This section is not available yet.</p>
        </section>
      )}
    </ProjectFrame>
  );
}
