// Package ring defines the built-in engine's queues in shared memory: the
// completion ring (many producers, possibly in several processes, one
// consumer), the receive ring (one producer, consumers in several processes)
// and the send ring (local to the QP's owner). Their byte layouts are the
// engine's ABI: direct verbs hands them to applications as they are.
//
// All indices are free-running uint32 counters; a slot is index & (depth-1),
// and depths are powers of two.
//
// # Completion ring
//
// Each 64-byte slot starts with a 64-bit state word: the low 32 bits hold
// the position the slot is for, bits 32-33 the phase (0 free, 1 claimed, 2
// ready) and bits 34-63 the claiming producer's pid. A producer claims slot
// t by compare-and-swap from free(t) to claimed(t, pid), helps the tail
// past t, writes the entry and publishes ready(t). The consumer takes
// ready(h) and frees the slot for h+depth. A slot still holding an earlier
// position means the ring is full: the producer sets the overrun flag
// instead of overwriting. Because a claim names its producer, a consumer
// that finds a slot claimed for a long time by a process that has died can
// skip it and count the completion as lost instead of hanging (the only way
// a completion is lost; Poll reports it).
//
// Direct verbs lets an application read ready slots itself, without freeing
// them: it stores the position after the last entry it read in the header's
// DBRec word, and the owner's engine, when it next runs for the ring, frees
// the slots up to there (applying each entry's side effects as if it had
// polled it). Producers see only slot states, so a slot the application
// read but the engine has not freed yet still counts as full.
//
// # Receive ring
//
// The owner writes receive WQEs at pi and publishes pi. A consumer (the
// engine acting for a sender, in whatever process) copies the WQE at ci and
// then advances ci by compare-and-swap; the copy is valid exactly when the
// CAS succeeds, because the owner reuses a slot only after ci has passed it.
package ring
