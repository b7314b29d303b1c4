export * from './index.js'
import * as ferroloop from './index.js'
export default ferroloop
