// Package codec encrypts workflow payloads (inputs, results, signals,
// queries, memos) with AES-256-GCM before they leave the process, so the
// Temporal server and its database only ever hold ciphertext. The key id
// travels in each payload's metadata, so keys can rotate: new payloads use
// the active key, old ones still decode with theirs. Imported through
// connect by every process that talks to Temporal, and by the codec server.
package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	MetadataEncoding = "encoding"
	MetadataKeyID    = "encryption-key-id"
	Encoding         = "binary/encrypted"
)

// Environment that turns encryption on (see KeysFromEnv).
const (
	EnvKeyFile = "COURIER_CODEC_KEY_FILE" // lines "id:base64-key", the first one active
	EnvKey     = "COURIER_CODEC_KEY"      // one base64 key
	EnvKeyID   = "COURIER_CODEC_KEY_ID"   // its id (default "default")
	// EnvRefusePlaintext, set to 1 or true, refuses a payload that is not
	// encrypted: once every client has the codec, a plaintext input or
	// signal can only come from one that bypasses it.
	EnvRefusePlaintext = "COURIER_CODEC_REFUSE_PLAINTEXT"
)

// Keys holds the AES-256 keys by id and which one encrypts.
type Keys struct {
	Active string
	ByID   map[string][]byte
	// RefusePlaintext makes Decode refuse payloads that are not encrypted;
	// by default they pass, so history from before encryption still reads.
	RefusePlaintext bool
}

// KeysFromEnv reads keys from COURIER_CODEC_KEY_FILE or COURIER_CODEC_KEY.
// ok is false when neither is set: encryption is off.
func KeysFromEnv() (keys Keys, ok bool, err error) {
	keys, ok, err = keysFromEnv()
	if !ok || err != nil {
		return keys, ok, err
	}
	switch v := os.Getenv(EnvRefusePlaintext); strings.ToLower(v) {
	case "", "0", "false":
	case "1", "true":
		keys.RefusePlaintext = true
	default:
		return Keys{}, false, fmt.Errorf("%s=%q: use 1 to refuse payloads that are not encrypted, or leave it unset", EnvRefusePlaintext, v)
	}
	return keys, true, nil
}

func keysFromEnv() (keys Keys, ok bool, err error) {
	if path := os.Getenv(EnvKeyFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Keys{}, false, fmt.Errorf("%s: %w", EnvKeyFile, err)
		}
		keys, err := ParseKeys(b)
		if err != nil {
			return Keys{}, false, fmt.Errorf("%s=%s: %w", EnvKeyFile, path, err)
		}
		return keys, true, nil
	}
	if v := os.Getenv(EnvKey); v != "" {
		id := os.Getenv(EnvKeyID)
		if id == "" {
			id = "default"
		}
		keys, err := ParseKeys([]byte(id + ":" + v))
		if err != nil {
			return Keys{}, false, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return keys, true, nil
	}
	return Keys{}, false, nil
}

// ParseKeys reads lines "id:base64-key" (32-byte keys); the first is active.
// Blank lines and lines starting with # are skipped.
func ParseKeys(b []byte) (Keys, error) {
	k := Keys{ByID: map[string][]byte{}}
	s := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, found := strings.Cut(line, ":")
		if !found || id == "" {
			return Keys{}, fmt.Errorf("line %d: want id:base64-key", n)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil {
			return Keys{}, fmt.Errorf("line %d: key %q is not base64: %w", n, id, err)
		}
		if len(raw) != 32 {
			return Keys{}, fmt.Errorf("line %d: key %q has %d bytes; AES-256 needs 32 (openssl rand -base64 32)", n, id, len(raw))
		}
		if _, dup := k.ByID[id]; dup {
			return Keys{}, fmt.Errorf("line %d: key id %q appears twice", n, id)
		}
		k.ByID[id] = raw
		if k.Active == "" {
			k.Active = id
		}
	}
	if k.Active == "" {
		return Keys{}, errors.New("no keys")
	}
	return k, nil
}

// Codec is an AES-256-GCM converter.PayloadCodec.
type Codec struct {
	active      string
	aeads       map[string]cipher.AEAD
	refusePlain bool
}

// New returns the codec for keys.
func New(keys Keys) (*Codec, error) {
	c := &Codec{active: keys.Active, aeads: map[string]cipher.AEAD{}, refusePlain: keys.RefusePlaintext}
	for id, key := range keys.ByID {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
		if c.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
	}
	if _, ok := c.aeads[keys.Active]; !ok {
		return nil, fmt.Errorf("active key %q is not among the keys", keys.Active)
	}
	return c, nil
}

// Encode encrypts each payload whole (data and metadata) with the active key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.active]
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("marshal payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(Encoding),
				MetadataKeyID:    []byte(c.active),
			},
			// The key id is authenticated too: a payload cannot be moved
			// under another key's name.
			Data: aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts encrypted payloads and passes others through, so history
// written before encryption was turned on still reads; with
// RefusePlaintext it refuses them instead.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[MetadataEncoding]) != Encoding {
			if c.refusePlain {
				return nil, fmt.Errorf("payload %d is not encrypted (encoding %q): refused, since %s is set; "+
					"its sender bypassed the codec", i, p.GetMetadata()[MetadataEncoding], EnvRefusePlaintext)
			}
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("payload encrypted with key %q, which this process does not hold", id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("encrypted payload too short")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("decrypt payload with key %q: %w", id, err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("unmarshal decrypted payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the default converter with this codec applied.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FromEnv returns the encrypting data converter when the environment
// configures keys, and nil when it does not.
func FromEnv() (converter.DataConverter, error) {
	keys, ok, err := KeysFromEnv()
	if err != nil || !ok {
		return nil, err
	}
	c, err := New(keys)
	if err != nil {
		return nil, err
	}
	return c.DataConverter(), nil
}
