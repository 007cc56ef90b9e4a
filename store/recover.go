package store

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// ExtendMessageText makes a stored message's text read text, when text extends it: the
// message's text blocks, joined in order, must be a prefix of text, and what text has
// beyond them goes onto the message's last block when that is a text block, or into a
// new text block after it. Everything else of the message (its other blocks, status,
// stop reason, usage) stays as stored. It returns how many bytes it added: 0, writing
// nothing, when the stored text already holds text or does not begin it.
//
// It is for a reply a crash cut short (after MarkInterrupted, before any turn runs):
// presenters checkpoint a reply in progress now and then, so the stored text can lag what
// was already sent; a message still being written must not be given to it.
// presenters.ErrNotFound when the session does not hold the message.
func (s *Store) ExtendMessageText(ctx context.Context, sessionID, messageID, text string) (_ int, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	// Read under the write lock: no writer can change the message between this read and
	// the write below.
	msgs, err := s.Messages(ctx, sessionID, presenters.MessageQuery{MessageID: messageID})
	if err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, fmt.Errorf("message %s in session %s: %w", messageID, sessionID, presenters.ErrNotFound)
	}
	m := msgs[0]
	var stored strings.Builder
	for _, b := range m.Blocks {
		if b.Type == presenters.BlockText {
			stored.WriteString(b.Text)
		}
	}
	if len(text) <= stored.Len() || !strings.HasPrefix(text, stored.String()) {
		return 0, nil
	}
	missing := text[stored.Len():]
	// Written as an update that appends to every stored text, nothing to all but the
	// last: only the last text's tail is written, not the whole reply again.
	u := MessageUpdate{Message: m}
	for i := range u.Blocks {
		if b := &u.Blocks[i]; b.Type == presenters.BlockText || b.Type == presenters.BlockReasoning {
			b.Text = ""
			u.Appended = append(u.Appended, i)
		}
	}
	if last := len(u.Blocks) - 1; last >= 0 && u.Blocks[last].Type == presenters.BlockText {
		u.Blocks[last].Text = missing
	} else {
		u.Blocks = append(u.Blocks, presenters.Block{Type: presenters.BlockText, Text: missing})
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		_, err := saveMessage(tx, u, nil) // nil: it reads what is stored
		return err
	})
	delete(s.committed, messageID)
	if err != nil {
		return 0, fmt.Errorf("extend the text of message %s: %w", messageID, err)
	}
	return len(missing), nil
}

// CutMessageText makes a stored message's text read text, when the stored text begins
// with text and what it holds beyond it lies in its last text block: that block is cut
// to end where text does. Everything else of the message stays as stored. It returns
// how many bytes it cut: 0, writing nothing, when the stored text is not text followed by
// more in its last text block.
//
// It is for a reply taken over from a replica that stored more of it than reached the
// event log (its appends were fenced out, or it stalled): subscribers saw only what the
// log holds. presenters.ErrNotFound when the session does not hold the message.
func (s *Store) CutMessageText(ctx context.Context, sessionID, messageID, text string) (_ int, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	msgs, err := s.Messages(ctx, sessionID, presenters.MessageQuery{MessageID: messageID})
	if err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, fmt.Errorf("message %s in session %s: %w", messageID, sessionID, presenters.ErrNotFound)
	}
	m := msgs[0]
	last := -1
	var before strings.Builder // the text blocks before the last one, joined
	for i, b := range m.Blocks {
		if b.Type == presenters.BlockText {
			if last >= 0 {
				before.WriteString(m.Blocks[last].Text)
			}
			last = i
		}
	}
	if last < 0 {
		return 0, nil
	}
	head, tail := before.String(), m.Blocks[last].Text
	if len(text) < len(head) || !strings.HasPrefix(text, head) || !strings.HasPrefix(tail, text[len(head):]) || len(head)+len(tail) == len(text) {
		return 0, nil
	}
	keep := text[len(head):]
	cut := len(tail) - len(keep)
	m.Blocks[last].Text = keep
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		_, err := saveMessage(tx, MessageUpdate{Message: m}, nil)
		return err
	})
	delete(s.committed, messageID)
	if err != nil {
		return 0, fmt.Errorf("cut the text of message %s: %w", messageID, err)
	}
	return cut, nil
}
