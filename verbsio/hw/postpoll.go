package hw

// postPoll decides when a post also polls its QP's send CQ in the same
// crossing (hwQP.PostSend). Software devices such as rxe and siw do the
// work of a request while it is posted, so its completion is ready when
// ibv_post_send returns, and taking it there saves the crossing of the
// Poll that would follow (about a third of a write_lat iteration's cost
// outside the kernel under emulation). A NIC completes later, so there
// the poll finds nothing; postPoll tries a window of signaled posts and,
// when too few of them found a completion, stops trying for a while.
// It has no cgo, so its policy is tested in every build.
type postPoll struct {
	tries, hits int // in the current window
	skip        int // signaled posts left before the next window
}

// The policy: a window of postPollWindow signaled posts; fewer than
// postPollMinHits completions found in it pause the polling for
// postPollPause signaled posts.
const (
	postPollWindow  = 64
	postPollMinHits = postPollWindow / 4
	postPollPause   = 1024
	// postPollMax bounds the completions one post takes.
	postPollMax = 16
)

// want reports whether a post whose last request is signaled (or
// whose QP signals every request) should poll.
func (p *postPoll) want(signaled bool) bool {
	if !signaled {
		return false
	}
	if p.skip > 0 {
		p.skip--
		return false
	}
	return true
}

// record counts one poll that found got completions.
func (p *postPoll) record(got int) {
	p.tries++
	if got > 0 {
		p.hits++
	}
	if p.tries == postPollWindow {
		if p.hits < postPollMinHits {
			p.skip = postPollPause
		}
		p.tries, p.hits = 0, 0
	}
}
