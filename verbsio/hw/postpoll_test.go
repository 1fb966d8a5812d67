package hw

import "testing"

func TestPostPollPolicy(t *testing.T) {
	tests := []struct {
		name     string
		hitEvery int // a poll finds a completion every hitEvery polls; 0: never
		posts    int // signaled posts
		want     int // posts that poll
	}{
		{"always finds: always polls", 1, 5000, 5000},
		{"finds a quarter: keeps polling", 4, 5000, 5000},
		{"never finds: one window, then pauses", 0, postPollWindow + postPollPause, postPollWindow},
		{"never finds: tries again after the pause", 0, 2*postPollWindow + postPollPause, 2 * postPollWindow},
		{"finds one in eight: pauses too", 8, postPollWindow + postPollPause, postPollWindow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p postPoll
			polls := 0
			for range tt.posts {
				if !p.want(true) {
					continue
				}
				polls++
				got := 0
				if tt.hitEvery > 0 && polls%tt.hitEvery == 0 {
					got = 1
				}
				p.record(got)
			}
			if polls != tt.want {
				t.Errorf("%d of %d posts polled, want %d", polls, tt.posts, tt.want)
			}
		})
	}
	var p postPoll
	if p.want(false) {
		t.Error("an unsignaled post polls")
	}
}
