package acp

import "slices"

// questions are what a session waits for a person to answer, of one kind (permission
// requests, elicitations): each by its id with the channel its one answer goes to, and
// shown, the session info's list of them in the order asked. The session's mu guards
// them.
type questions[Q, A any] struct {
	byID  map[string]*question[Q, A]
	id    func(Q) string
	shown *[]Q
}

// question is one question asked; answer holds its one answer.
type question[Q, A any] struct {
	req    Q
	answer chan A
}

func newQuestions[Q, A any](shown *[]Q, id func(Q) string) questions[Q, A] {
	return questions[Q, A]{byID: map[string]*question[Q, A]{}, id: id, shown: shown}
}

// ask records req as waiting for its answer.
func (qs *questions[Q, A]) ask(req Q) *question[Q, A] {
	q := &question[Q, A]{req: req, answer: make(chan A, 1)}
	qs.byID[qs.id(req)] = q
	// Clip and Clone: snapshots of the session's info share the old backing array.
	*qs.shown = append(slices.Clip(*qs.shown), req)
	return q
}

// lookup is the waiting question with this id, or nil.
func (qs *questions[Q, A]) lookup(id string) *question[Q, A] { return qs.byID[id] }

// take removes q and reports whether it was still waiting: of the answers that race (a
// person's, the timeout, a cancel) only the first may go to it.
func (qs *questions[Q, A]) take(q *question[Q, A]) bool {
	id := qs.id(q.req)
	if qs.byID[id] != q {
		return false
	}
	delete(qs.byID, id)
	*qs.shown = slices.DeleteFunc(slices.Clone(*qs.shown), func(r Q) bool { return qs.id(r) == id })
	return true
}

// waiting are the questions still waiting, in the order asked.
func (qs *questions[Q, A]) waiting() []*question[Q, A] {
	out := make([]*question[Q, A], 0, len(*qs.shown))
	for _, r := range *qs.shown {
		if q := qs.byID[qs.id(r)]; q != nil {
			out = append(out, q)
		}
	}
	return out
}

func (qs *questions[Q, A]) len() int { return len(qs.byID) }
