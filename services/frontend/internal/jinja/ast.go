package jinja

// Statements.
type (
	node interface{}

	textNode   struct{ text string }
	outputNode struct {
		e    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
		line   int
	}
	forNode struct {
		targets    []string
		iter, cond expr
		body, els  []node
		line       int
	}
	// setNode assigns e to targets (unpacking when there are several),
	// or to attr of the namespace named targets[0].
	setNode struct {
		targets []string
		attr    string
		e       expr
		line    int
	}
	setBlockNode struct {
		name    string
		filters []filterCall
		body    []node
		line    int
	}
	macroNode struct {
		m    *macro
		line int
	}
	filterBlockNode struct {
		filters []filterCall
		body    []node
		line    int
	}
	doNode struct {
		e    expr
		line int
	}
	breakNode    struct{ line int }
	continueNode struct{ line int }
)

// Expressions.
type (
	expr interface{}

	literal  struct{ v any }
	nameExpr struct{ name string }
	listExpr struct{ items []expr }
	dictExpr struct{ keys, vals []expr }
	attrExpr struct {
		obj  expr
		name string
	}
	itemExpr  struct{ obj, key expr }
	sliceExpr struct{ obj, lo, hi, step expr }
	callExpr  struct {
		fn   expr
		args argList
	}
	filterExpr struct {
		obj expr
		f   filterCall
	}
	testExpr struct {
		obj  expr
		name string
		args []expr
		neg  bool
	}
	binExpr struct {
		op   string
		l, r expr
	}
	// compareExpr is a chain a < b <= c, true when every link is.
	compareExpr struct {
		first  expr
		ops    []string
		rights []expr
	}
	unaryExpr struct {
		op string
		x  expr
	}
	condExpr struct{ cond, yes, no expr }
)

type argList struct {
	pos []expr
	kw  []kwExpr
}

type kwExpr struct {
	name string
	e    expr
}

type filterCall struct {
	name string
	args argList
}

// macro is a {% macro %}: a callable whose body renders to its result.
type macro struct {
	name     string
	params   []string
	defaults []expr // nil where a parameter has none
	body     []node
	closure  *frame // set when the definition runs
}
