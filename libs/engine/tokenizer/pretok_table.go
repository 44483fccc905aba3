package tokenizer

import (
	"fmt"
	"sort"
)

// runeRanges is a sorted set of inclusive code point ranges.
type runeRanges [][2]rune

func (rr runeRanges) has(r rune) bool {
	i := sort.Search(len(rr), func(i int) bool { return rr[i][1] >= r })
	return i < len(rr) && rr[i][0] <= r
}

func sortedRanges(rr runeRanges) runeRanges {
	sort.Slice(rr, func(i, j int) bool { return rr[i][0] < rr[j][0] })
	return rr
}

// deepseekLetters is the letter class of DeepSeek LLM's expression,
// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+: the cased letters of its tokenizer.json.
var deepseekLetters = sortedRanges(runeRanges{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
	{0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
	{0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
	{0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
	{0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
	{0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
	{0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
	{0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
	{0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
	{0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
	{0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
	{0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
})

// deepseekPunct is [!-/:-~！-／：-～‘-‟　-。] of DeepSeek LLM's expression.
var deepseekPunct = sortedRanges(runeRanges{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
})

// cjk is [一-龥ࠀ-一가-퟿] of the DeepSeek expressions.
var cjk = sortedRanges(runeRanges{{0x0800, 0x4E00}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7FF}})

// inRanges is a set test over literal ranges. llama.cpp matches such
// expressions with non-ASCII whitespace replaced by \v, so whitespace is
// never in a literal set, whatever its code point.
func inRanges(rr runeRanges) func(rune, uint8) bool {
	return func(r rune, c uint8) bool { return c&classSpace == 0 && rr.has(r) }
}

func isNewline(r rune, _ uint8) bool { return r == '\r' || r == '\n' }

func isDigit(r rune, _ uint8) bool { return r >= '0' && r <= '9' }

// asciiSymbols returns a set test for \p{P} plus the listed ASCII
// symbols ([\p{P}\$\+<=>\^~\|] and Falcon's variant with `).
func asciiSymbols(extra string) func(rune, uint8) bool {
	var set [128]bool
	for _, b := range []byte(extra) {
		set[b] = true
	}
	return func(r rune, c uint8) bool {
		return c&classPunct != 0 || (r < 128 && set[r])
	}
}

// preTokenizers maps GGUF's tokenizer.ggml.pre names to their splitters,
// as llama.cpp's llm_tokenizer_bpe does.
var preTokenizers = func() map[string]*preTokenizer {
	gpt2 := byMatch(matchGPT2)
	llama3 := &preTokenizer{steps: []splitStep{byMatch(matchLlama3(3, false))}}
	qwen2 := &preTokenizer{steps: []splitStep{byMatch(matchLlama3(1, false))}} // \p{N}: one digit a word
	qwen35 := &preTokenizer{steps: []splitStep{byMatch(matchLlama3(1, true))}}
	gpt2Only := &preTokenizer{steps: []splitStep{gpt2}}
	starcoder := &preTokenizer{steps: []splitStep{byMatch(matchClassRun(classNumber, 1)), gpt2}}
	m := map[string]*preTokenizer{
		"default": {steps: []splitStep{
			byMatch(matchSet(asciiSymbols("$+<=>^~|"), false, 0)),
			gpt2,
			byMatch(matchClassRun(classNumber, 0)),
			byMatch(matchSet(isDigit, false, 3)),
		}},
		"falcon": {steps: []splitStep{
			byMatch(matchSet(asciiSymbols("$+<=>^~|`"), false, 0)),
			gpt2,
			byMatch(matchSet(isDigit, false, 3)),
		}},
		"deepseek-llm": {steps: []splitStep{
			byMatch(matchSet(isNewline, false, 1)),
			byMatch(matchSet(inRanges(deepseekLetters), true, 0)),
			byMatch(matchSet(inRanges(deepseekPunct), true, 0)),
			splitTrailingSpace,
			byMatch(matchSet(inRanges(cjk), false, 0)),
			byMatch(matchClassRun(classNumber, 0)),
		}},
		"deepseek-coder": {steps: []splitStep{
			byMatch(matchSet(isNewline, false, 1)),
			byMatch(matchSet(func(_ rune, c uint8) bool { return c&classLetter != 0 }, true, 0)),
			byMatch(matchSet(func(_ rune, c uint8) bool { return c&classPunct != 0 }, true, 0)),
			byMatch(matchSet(inRanges(cjk), false, 0)),
			byMatch(matchClassRun(classNumber, 1)),
		}},
		"gemma4": {steps: []splitStep{byMatch(matchNewlines)}},
		"qwen35": qwen35,
	}
	for _, name := range []string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe"} {
		m[name] = llama3
	}
	for _, name := range []string{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"} {
		m[name] = qwen2
	}
	for _, name := range []string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en", "jina-v2-code", "roberta-bpe"} {
		m[name] = gpt2Only
	}
	for _, name := range []string{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"} {
		m[name] = starcoder
	}
	return m
}()

// lookupPre returns the pre-tokenizer of name ("" is "default").
func lookupPre(name string) (*preTokenizer, error) {
	if name == "" {
		name = "default"
	}
	p, ok := preTokenizers[name]
	if !ok {
		return nil, fmt.Errorf("%w: pre-tokenizer %q is not supported (supported: %s)", ErrUnsupported, name, supportedPres())
	}
	return p, nil
}

func supportedPres() string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}
