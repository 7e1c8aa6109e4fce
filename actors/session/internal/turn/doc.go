// Package turn is a session's conversation as a pure state machine: what
// clients ask (prompts, aborts, answers to dialogs), what the agent writes
// (pi's RPC events, the answers to the commands the machine sent) and what
// the session decides (the agent is ready, gone, stopped) go in; typed chat
// events, agent commands and transcript entries come out, through Out.
//
// A prompt is recorded before it is accepted: the machine asks the session
// to write its user entry (Out.Record) and shows nothing of it, and starts
// nothing, until the session says the entry is durable (Recorded); a
// prompt whose record failed is dropped (Unrecorded), as if it never came.
// A client's "accepted" is thus a promise the transcript keeps. A prompt
// that starts a turn at once names that turn in its record; one that waits
// is recorded with turn 0, and the turn that answers it writes its entry
// again with its id (readers keep a prompt's last entry).
//
// One turn runs at a time. A prompt that arrives while a turn runs (or
// before the agent is ready) waits in the inbox; the next turn answers every
// prompt waiting then, in one prompt command whose message joins their texts
// with a blank line. A turn is also opened for a run the agent starts on its
// own. A turn ends when the agent's run ends (agent_end), when the agent
// refuses the prompt, when it answers the prompt without a run (a get_state
// barrier tells), when the agent exits, when the session closes, or, after
// an abort the agent does not act on, when the abort grace expires.
//
// Ids: turn ids and prompt ids are two sequences, each continuing above
// Config.LastID (the highest id the session ever handed out), so that both
// stay unique for the life of the session across activations; a turn's chat
// message id is pb.TurnMessageID of its turn id. With Config.Reserve the
// machine never hands out an id above what the session reserved.
//
// A Machine belongs to the session actor: one goroutine at a time, no locks,
// no goroutines, no timers and no clock of its own (the caller arms the
// abort grace when asked and passes a clock for transcript times).
package turn
