package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/abde64c9/courier/deploy"
)

// takeoverWithin bounds the wait for a dead node's shards to be owned again.
const takeoverWithin = 3 * time.Minute

// shard is a history shard's row in Temporal's shards table: a node that
// acquires a shard writes itself as the owner ("<its history service's
// address>-<shard>-<uuid>"), with a range ID one higher.
type shard struct {
	rangeID int64
	owner   string
}

// readShards reads every shard's owner and range ID.
func readShards(ctx context.Context) (map[int32]shard, error) {
	db, err := temporalDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close(context.Background())
	rows, err := db.Query(ctx, "SELECT shard_id, range_id, data, data_encoding FROM shards")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]shard{}
	for rows.Next() {
		var id int32
		var s shard
		var data []byte
		var enc string
		if err := rows.Scan(&id, &s.rangeID, &data, &enc); err != nil {
			return nil, err
		}
		if enc != "Proto3" {
			return nil, fmt.Errorf("shard %d: data encoded as %s, not Proto3", id, enc)
		}
		s.owner = shardOwner(data)
		out[id] = s
	}
	return out, rows.Err()
}

// shardOwner is field 3 (owner) of the server's ShardInfo message.
func shardOwner(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 3 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return string(v)
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

// nodeKill is a node SIGKILLed, and the shards it owned at that moment.
type nodeKill struct {
	node  deploy.Node
	pid   int
	at    time.Time
	owned map[int32]shard
}

// killNode SIGKILLs node n, noting first which shards it owns.
func (t *topo) killNode(ctx context.Context, n deploy.Node) (nodeKill, error) {
	k := nodeKill{node: n, owned: map[int32]shard{}}
	shards, err := readShards(ctx)
	if err != nil {
		return k, fmt.Errorf("read shard owners: %w", err)
	}
	for id, s := range shards {
		if strings.HasPrefix(s.owner, n.HistoryAddr()+"-") {
			k.owned[id] = s
		}
	}
	k.at = time.Now()
	k.pid, err = t.kill(nodeName(n.N))
	return k, err
}

// awaitTakeover waits until every shard the killed node owned has been
// acquired again (a higher range ID), and returns the time since the kill.
func (k nodeKill) awaitTakeover(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, takeoverWithin)
	defer cancel()
	for {
		shards, err := readShards(ctx)
		if err == nil {
			done := true
			for id, was := range k.owned {
				if shards[id].rangeID <= was.rangeID {
					done = false
				}
			}
			if done {
				return time.Since(k.at), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("node %d's shards were not owned again within %s of its kill", k.node.N, takeoverWithin)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// takeover is one node kill's record in takeovers.jsonl.
type takeover struct {
	Node    int       `json:"node"`
	Killed  time.Time `json:"killed"`
	Shards  int       `json:"shards"`
	Seconds float64   `json:"seconds"`
}

func (t *topo) recordTakeover(n int, k nodeKill, took time.Duration) error {
	f, err := os.OpenFile(filepath.Join(t.dir, "takeovers.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	return json.NewEncoder(f).Encode(takeover{Node: n, Killed: k.at, Shards: len(k.owned), Seconds: took.Seconds()})
}

// takeoversSince are the node kills recorded since t0.
func (t *topo) takeoversSince(t0 time.Time) ([]takeover, error) {
	b, err := os.ReadFile(filepath.Join(t.dir, "takeovers.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []takeover
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r takeover
		if err := dec.Decode(&r); err != nil {
			return nil, err
		}
		if r.Killed.After(t0) {
			out = append(out, r)
		}
	}
	return out, nil
}
