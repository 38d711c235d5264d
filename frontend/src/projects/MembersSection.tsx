import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { ApiError } from "../api/client";
import { memberAdd, memberRemove, memberUpdate, projectKeys, type Role } from "../api/projects";
import { RoleBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { useMembers } from "../components/projectQueries";

const ROLES: Role[] = ["annotator", "manager", "admin"];

function AddMemberForm({ projectId }: { projectId: number }) {
  const client = useQueryClient();
  const [username, setUsername] = useState("");
  const [role, setRole] = useState<Role>("annotator");
  const add = useMutation({
    mutationFn: () => memberAdd(projectId, username.trim(), role),
    onSuccess: () => {
      setUsername("");
      client.invalidateQueries({ queryKey: projectKeys.members(projectId) });
    },
  });
  const errors = add.error instanceof ApiError ? add.error.fieldErrors : {};

  function submit(event: FormEvent) {
    event.preventDefault();
    add.mutate();
  }

  return (
    <form className="inline-form" onSubmit={submit} aria-label="Add member">
      <label className="field">
        <span>Username</span>
        <input value={username} onChange={(e) => setUsername(e.target.value)} required autoComplete="off" />
        {errors.username && <span className="field-error">{errors.username.join(" ")}</span>}
      </label>
      <label className="field">
        <span>Role</span>
        <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
        {errors.role && <span className="field-error">{errors.role.join(" ")}</span>}
      </label>
      <button type="submit" className="button primary" disabled={add.isPending || !username.trim()}>
        {add.isPending ? "Adding…" : "Add member"}
      </button>
      {add.error && (
        <div className="span-all">
          <ErrorBanner error={add.error} fieldErrors={{}} title="Could not add the member" />
        </div>
      )}
    </form>
  );
}

/** Who is in the project and with which role; admins add, change and remove members. */
export function MembersSection({ projectId, editable }: { projectId: number; editable: boolean }) {
  const members = useMembers(projectId);
  const client = useQueryClient();
  const refresh = () => client.invalidateQueries({ queryKey: projectKeys.members(projectId) });
  const change = useMutation({
    mutationFn: ({ memberId, role }: { memberId: number; role: Role }) => memberUpdate(projectId, memberId, role),
    onSettled: refresh,
  });
  const remove = useMutation({
    mutationFn: (memberId: number) => memberRemove(projectId, memberId),
    onSettled: refresh,
  });
  const busy = change.isPending || remove.isPending;

  return (
    <section aria-labelledby="members-title">
      <div className="section-header">
        <h2 id="members-title">Members</h2>
      </div>
      {editable && <AddMemberForm projectId={projectId} />}
      {members.isPending && <Spinner label="Loading members…" />}
      {members.isError && <ErrorBanner error={members.error} onRetry={() => members.refetch()} />}
      {members.data && (
        <Table
          testId="member-table"
          rows={members.data}
          rowKey={(member) => member.id}
          empty={<p className="empty-state">No members yet.</p>}
          columns={[
            { header: "User", cell: (member) => member.user.username },
            {
              header: "Role",
              cell: (member) =>
                editable ? (
                  <select
                    aria-label={`Role of ${member.user.username}`}
                    value={member.role}
                    disabled={busy}
                    onChange={(e) => change.mutate({ memberId: member.id, role: e.target.value as Role })}
                  >
                    {ROLES.map((r) => (
                      <option key={r} value={r}>
                        {r}
                      </option>
                    ))}
                  </select>
                ) : (
                  <RoleBadge role={member.role} />
                ),
            },
            {
              hidden: !editable,
              headerProps: { "aria-label": "Actions" },
              cellProps: () => ({ className: "row-actions" }),
              cell: (member) => (
                <button
                  type="button"
                  className="button subtle small danger"
                  disabled={busy}
                  onClick={() => {
                    if (window.confirm(`Remove ${member.user.username} from this project?`)) {
                      remove.mutate(member.id);
                    }
                  }}
                >
                  Remove
                </button>
              ),
            },
          ]}
          // a refusal shows under the row whose control caused it, not above the table
          rowDetail={(member) => {
            const changeFailed = change.error && change.variables?.memberId === member.id;
            const removeFailed = remove.error && remove.variables === member.id;
            if (!changeFailed && !removeFailed) return null;
            return {
              props: { "data-testid": "member-error" },
              content: (
                <>
                  {changeFailed && <ErrorBanner error={change.error} title="Could not change the role" />}
                  {removeFailed && <ErrorBanner error={remove.error} title="Could not remove the member" />}
                </>
              ),
            };
          }}
        />
      )}
    </section>
  );
}
