// Command llama2gguf converts a llama2.c checkpoint and its tokenizer into
// a GGUF file that llama.cpp serves with the checkpoint's own context:
//
//	llama2gguf -checkpoint stories260K.bin -tokenizer tok512.bin -o stories260K.gguf
//
// -chat-template embeds a Jinja chat template (tokenizer.chat_template),
// which a worker serving the file ships to frontends.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"switchyard.dev/libs/engine/gguf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "llama2gguf:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("llama2gguf", flag.ContinueOnError)
	ckptPath := fs.String("checkpoint", "", "llama2.c checkpoint (.bin)")
	tokPath := fs.String("tokenizer", "", "llama2.c tokenizer (.bin)")
	out := fs.String("o", "", "GGUF file to write")
	name := fs.String("name", "", "model name in the file (default: the checkpoint's base name)")
	tmplPath := fs.String("chat-template", "", "Jinja chat template file to embed as tokenizer.chat_template")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ckptPath == "" || *tokPath == "" || *out == "" {
		return fmt.Errorf("-checkpoint, -tokenizer and -o are required")
	}
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(*ckptPath), filepath.Ext(*ckptPath))
	}
	var extra []gguf.KV
	if *tmplPath != "" {
		src, err := os.ReadFile(*tmplPath)
		if err != nil {
			return err
		}
		extra = append(extra, gguf.KV{Key: "tokenizer.chat_template", Value: string(src)})
	}
	return gguf.ConvertFiles(*out, *ckptPath, *tokPath, *name, extra...)
}
