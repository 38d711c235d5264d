import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import type { EpisodeDetail } from "../api/episodes";
import { type Command, type ConnectionState, EpisodeSocket, type ServerMessage } from "../api/ws";
import {
  applyMessage,
  commandSent,
  emptyLive,
  fromDetail,
  isTerminal,
  type LiveEpisode,
  noticeDismissed,
} from "./episodeState";
import { type LiveScreen, useLiveScreen } from "./liveScreen";
import { browserMsFromPerformance, SessionClock } from "./thinkAloud/clock";

type StreamAction =
  | { kind: "load"; detail: EpisodeDetail }
  | { kind: "message"; message: ServerMessage }
  | { kind: "sent"; id: string; type: string }
  | { kind: "dismiss"; key: number };

function reducer(state: LiveEpisode, action: StreamAction): LiveEpisode {
  switch (action.kind) {
    case "load":
      return fromDetail(action.detail);
    case "message":
      return applyMessage(state, action.message);
    case "sent":
      return commandSent(state, { id: action.id, type: action.type });
    case "dismiss":
      return noticeDismissed(state, action.key);
  }
}

export interface EpisodeStream {
  live: LiveEpisode;
  connection: ConnectionState;
  connectionDetail: string;
  /** Send a control command (pause, approve, ...); returns its client id, pending until answered. */
  send: (command: Command) => string | null;
  reconnect: () => void;
  dismissNotice: (key: number) => void;
  /** The server's clock, measured from each `hello` (think-aloud audio is stamped with it). */
  clock: SessionClock;
  /** The env's screen as it is now, while the worker streams it (a person decides or acts); else null. */
  liveScreen: LiveScreen | null;
}

/**
 * The episode as loaded over REST, then kept current by its WebSocket. The socket starts after
 * the REST load and asks for a full replay (after=0); steps are keyed by index, so a step seen
 * both ways is stored once.
 */
export function useEpisodeStream(episodeId: number, detail: EpisodeDetail | undefined): EpisodeStream {
  const [live, dispatch] = useReducer(reducer, emptyLive);
  const [connection, setConnection] = useState<ConnectionState>("closed");
  const [connectionDetail, setConnectionDetail] = useState("");
  const socketRef = useRef<EpisodeSocket | null>(null);
  const statusRef = useRef<string | undefined>(undefined);
  const [clock] = useState(() => new SessionClock());
  const { screen: liveScreen, onFrame, clear: clearLive } = useLiveScreen();
  const loaded = detail !== undefined;

  useEffect(() => {
    if (detail) dispatch({ kind: "load", detail });
    // Only the first load seeds the state; later REST refetches would rewind live events.
  }, [loaded, episodeId]);

  statusRef.current = live.episode?.status;

  useEffect(() => {
    if (!loaded) return;
    const socket = new EpisodeSocket({
      episodeId,
      after: 0,
      onMessage: (message) => {
        const serverTime = (message.data as { server_time?: unknown } | undefined)?.server_time;
        if (message.type === "hello" && typeof serverTime === "number") {
          clock.observe({
            serverTime,
            connectingAt: browserMsFromPerformance(socket.connectingAt),
            openedAt: browserMsFromPerformance(socket.openedAt),
            receivedAt: browserMsFromPerformance(performance.now()),
          });
        }
        if (message.type === "live.frame") {
          onFrame(message.data); // a view, not an event: kept apart from the episode's state
          return;
        }
        // A step ran or a proposal opened: its still is newer than the last frame until the next frame comes.
        if (["step.proposed", "step.executed", "episode.finished"].includes(message.type)) clearLive();
        dispatch({ kind: "message", message });
      },
      onStateChange: (state, why) => {
        // A finished episode's socket may close for good; do not retry forever.
        if (state === "reconnecting" && isTerminal(statusRef.current as never)) {
          socket.close();
          setConnection("closed");
          setConnectionDetail("Episode ended; live updates stopped.");
          return;
        }
        setConnection(state);
        setConnectionDetail(why);
      },
    });
    socketRef.current = socket;
    socket.start();
    return () => {
      socket.close();
      socketRef.current = null;
    };
  }, [episodeId, loaded]);

  const send = useCallback((command: Command) => {
    const socket = socketRef.current;
    if (!socket) return null;
    const id = socket.send(command);
    dispatch({ kind: "sent", id, type: command.type });
    return id;
  }, []);
  const reconnect = useCallback(() => socketRef.current?.reconnectNow(), []);
  const dismissNotice = useCallback((key: number) => dispatch({ kind: "dismiss", key }), []);

  return { live, connection, connectionDetail, send, reconnect, dismissNotice, clock, liveScreen };
}
