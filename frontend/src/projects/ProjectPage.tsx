import { Link, useSearchParams } from "react-router";
import { useSession } from "../components/useSession";
import { ProjectFrame } from "../shell/ProjectFrame";
import { useIdParam } from "../components/useIdParam";
import { MembersSection } from "./MembersSection";
import { canAdminister, canManage } from "../components/permissions";
import { ProjectDetails } from "./ProjectDetails";
import { PrivacySection } from "./PrivacySection";
import { TasksSection } from "./TasksSection";
import { AskSection } from "./AskSection";
import "./projects.css";

type Tab = "tasks" | "members" | "privacy" | "asking";

const TAB_LABELS: Record<Tab, string> = { tasks: "Tasks", members: "Members", privacy: "Personal data", asking: "Asking a person" };

/** `/projects/:projectId`: details, tasks and members, and the way into the project's other parts. */
export function ProjectPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  const [params, setParams] = useSearchParams();
  const asked = params.get("tab");
  const tab: Tab = asked === "members" || asked === "privacy" || asked === "asking" ? asked : "tasks";

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
            {(["tasks", "members", ...(canManage(project, user) ? ["privacy", "asking"] : [])] as Tab[]).map((t) => (
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
                {TAB_LABELS[t]}
              </button>
            ))}
          </div>
          <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`}>
            {tab === "tasks" ? (
              <TasksSection projectId={project.id} editable={canManage(project, user)} />
            ) : tab === "privacy" && canManage(project, user) ? (
              <PrivacySection projectId={project.id} admin={canAdminister(project, user)} />
            ) : tab === "asking" && canManage(project, user) ? (
              <AskSection projectId={project.id} />
            ) : (
              <MembersSection projectId={project.id} editable={canAdminister(project, user)} />
            )}
          </div>
        </>
      )}
    </ProjectFrame>
  );
}
