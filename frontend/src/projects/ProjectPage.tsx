import { Link, useSearchParams } from "react-router";
import { useSession } from "../components/useSession";
import { ProjectFrame } from "../shell/ProjectFrame";
import { useIdParam } from "../components/useIdParam";
import { MembersSection } from "./MembersSection";
import { canAdminister, canManage } from "../components/permissions";
import { ProjectDetails } from "./ProjectDetails";
import { TasksSection } from "./TasksSection";
import "./projects.css";

type Tab = "tasks" | "members";

/** `/projects/:projectId`: details, tasks and members, and the way into the project's other parts. */
export function ProjectPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  const [params, setParams] = useSearchParams();
  const tab: Tab = params.get("tab") === "members" ? "members" : "tasks";

  return (
    <ProjectFrame projectId={projectId}>
      {(project) => (
        <>
          <ProjectDetails key={project.id} project={project} editable={canManage(project, user)} />
          <div className="quick-links">
            <Link className="button primary" to={`/projects/${project.id}/episodes`}>
              Live sessions
            </Link>
          </div>
          <div className="tabs" role="tablist" aria-label="Project settings">
            {(["tasks", "members"] as Tab[]).map((t) => (
              <button
                key={t}
                type="button"
                role="tab"
                id={`tab-${t}`}
                aria-selected={tab === t}
                aria-controls={`panel-${t}`}
                className={tab === t ? "tab active" : "tab"}
                onClick={() => setParams(t === "tasks" ? {} : { tab: t }, { replace: true })}
              >
                {t === "tasks" ? "Tasks" : "Members"}
              </button>
            ))}
          </div>
          <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`}>
            {tab === "tasks" ? (
              <TasksSection projectId={project.id} editable={canManage(project, user)} />
            ) : (
              <MembersSection projectId={project.id} editable={canAdminister(project, user)} />
            )}
          </div>
        </>
      )}
    </ProjectFrame>
  );
}
